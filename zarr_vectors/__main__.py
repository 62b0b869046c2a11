"""``python -m zarr_vectors`` runs the ``zarr-vectors`` command."""

from .cli import main

raise SystemExit(main())
