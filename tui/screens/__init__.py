"""The app's screens: the queue (where asks are decided), the steps over an ask (reason, expand, the
whole-session confirmation, the batch preview, quit) and the other views (history, grants, sessions,
help, config review)."""
