"""What a user reads: tables, the HTML page, comparisons, history, status, their layout and footnotes."""
