"""The terminal app a person keeps open beside AI coding agents: the command line (`cli`), its commands,
the Textual app (`app`, its parts, `screens`, `widgets`, pure `render`ings) and what it stands on
(the keys' table `actions`, `keysafety`, `sanitize`, `settings`, the simulated children of `demo`)."""
