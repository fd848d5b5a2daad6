"""The app's widgets: the queue's table, detail, filter, status line and key legend, the virtual history
list, and the paint probe the key safety times keys from."""
