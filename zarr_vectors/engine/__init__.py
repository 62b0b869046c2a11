"""The read and write machinery every geometry kind shares: storage, cell arrays, levels, plans and fetches."""

__all__: list[str] = []
