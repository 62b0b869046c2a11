"""Reading a level: point rows of a box (``points``), links and faces, queries and ``where=``
filters. Never imports ``engine.write``."""

__all__: list[str] = []
