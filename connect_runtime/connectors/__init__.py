"""Built-in connectors: ``files.DirectorySource``, ``files.FileSink``, ``datagen.DataGenSource``."""
