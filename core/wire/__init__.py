"""The forwarded-permission wire, one room each (`base` names them all): import from the module that
holds the name."""
