"""Reading a level: the pure box planner (``plan``), batched fetches of decoded cells
(``fetch``, laid out by ``keys``), point rows of a box (``points``), links and faces, queries
of any kind (``query``) and ``where=`` filters. Never imports ``engine.write``."""

__all__: list[str] = []
