"""The shared vocabulary of an ask's route: the ask and its key, a decision and the arbiter that makes
it (`asks`), and what serving reports about each request file (`events`). One floor below serving,
so the person, the history, the courier and the app name an ask without importing a stage."""
