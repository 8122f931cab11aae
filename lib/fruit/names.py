"""The paper's architecture names and parameter budget, as plain data (docs/paper.md §2,
§10.3).

Profiles, training settings, the commands and reporting read these without importing
model code or torch; ``fruit.models`` builds the architectures they name.
"""

# The fifteen architectures, in the order of the paper's table rows.
ARCHITECTURES = (
    "Tf",
    "Tf+Sup",
    "Tf+Sup+Sup",
    "Tf+Nd",
    "Tf+Nd+Nd",
    "RNN",
    "RNN+Sup",
    "RNN+Sup+R",
    "RNN+Nd",
    "RNN+Nd+R",
    "LSTM",
    "LSTM+Sup",
    "LSTM+Sup+R",
    "LSTM+Nd",
    "LSTM+Nd+R",
)

# Every model is sized to about this many trainable parameters (d from choose_d).
TARGET_PARAMS = 200_000
