"""The style names every rendering uses (Textual theme variables)."""

LABEL_STYLE = "bold $text-primary"
DIM = "$text-muted"
WARN = "bold $text-warning"
ERROR = "bold $text-error"
