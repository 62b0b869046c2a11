"""Reading a level: point rows of a box (``points``), links and faces, queries, ``where=`` filters
and polygon selections. Never imports ``engine.write``."""

__all__: list[str] = []
