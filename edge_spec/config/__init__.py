"""The settings tree (`settings`) and hardware profiles (`profiles`)."""
