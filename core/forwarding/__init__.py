"""Forwarding: the on-disk side of pi's protocol that serving stands on: a session's inbox
(`inbox`: its requests read by descriptor, its responses written), the watch that says which inboxes
changed (`watch`, over `inotify`, or listings in `poll`), a server's heartbeat and session lock
(`liveness`) and the survey of every inbox under the root (`survey`)."""
