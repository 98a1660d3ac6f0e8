"""Release records and their rendering (text, JSON, HTML) and plots."""
