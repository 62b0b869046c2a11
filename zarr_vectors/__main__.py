"""``python -m zarr_vectors`` runs the ``zarr-vectors`` command."""

from zarr_vectors.cli import main

raise SystemExit(main())
