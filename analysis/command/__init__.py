"""What every analysis command shares: user errors printed as one line with exit code 2 (errors) and output
paths checked before any work is done (outputs)."""
