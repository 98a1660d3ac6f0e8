"""Privacy budgets per (analyst, dataset) and the append-only ledger of charges."""
