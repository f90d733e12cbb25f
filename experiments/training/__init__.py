"""One run: assembly, the LightningModule, task adapters, Lightning parts, callbacks, run folders."""
