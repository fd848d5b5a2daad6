"""The forwarded-permission wire: request and response models, the tolerant reader, the strict writer,
and the child-fixed facts a judgment runs on. Import each name from the module that holds it."""
