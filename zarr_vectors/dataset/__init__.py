"""An opened store: :class:`Dataset` (``core``) with its group reads (``groups``), level choice,
pyramid building and appends (``levels``), and polygon selections (``polygon``). This is the
package's face: other modules import from ``zarr_vectors.dataset`` only."""

from zarr_vectors.dataset.core import Dataset, open
from zarr_vectors.dataset.polygon import object_extents, query_polygon

__all__ = ["Dataset", "object_extents", "open", "query_polygon"]
