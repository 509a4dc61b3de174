"""conceptforge loaders: evaluation protocols of the four papers over published splits."""
