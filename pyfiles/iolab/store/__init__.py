"""A run's files made samples: recording, re-deriving (reparse), the ledger of runs, the storage side's files."""
