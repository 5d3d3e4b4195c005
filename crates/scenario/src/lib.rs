//! Scenario files (TOML) shared by `wb sim` and `wb run`.
