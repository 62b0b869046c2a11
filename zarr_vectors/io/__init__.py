"""Readers and writers of external file formats (SWC, ...), and ingestion into stores."""
