"""Writing a level: inputs partitioned into chunks, cells encoded and staged, object tables, metadata last."""

__all__: list[str] = []
