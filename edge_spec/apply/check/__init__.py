"""The answer check: what a model's answer dropped from the original or left out of the
snippet (`shown`), and the verdict a front end reports for a merge or an answer (`verdict`)."""
