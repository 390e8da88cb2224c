"""Columnar, memory-mapped datasets: tokenized data held as a few flat numpy arrays on disk.

`ColumnarBuilder` turns batches of tokenized records into column files without keeping a Python
object per instance; `ColumnarDataset` maps those files back (numpy memory maps) and hands the data
loader packed fields that it gathers batches from with vectorised operations; `cached_dataset`
keeps built datasets in an on-disk cache keyed by what they were built from. Each name is imported
when first used: listing or cleaning the cache needs neither numpy's datasets nor torch.
"""

from typing import TYPE_CHECKING

from ipuflow.plugins import lazy_exports

if TYPE_CHECKING:
    from ipuflow.data.columnar.builder import ColumnarBuilder, FieldBatch
    from ipuflow.data.columnar.cache import DataCache, cached_dataset, file_identity
    from ipuflow.data.columnar.dataset import ColumnarDataset

_EXPORTS = {
    **dict.fromkeys(["ColumnarBuilder", "FieldBatch"], "ipuflow.data.columnar.builder"),
    "ColumnarDataset": "ipuflow.data.columnar.dataset",
    **dict.fromkeys(["DataCache", "cached_dataset", "file_identity"], "ipuflow.data.columnar.cache"),
}

__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["ColumnarBuilder", "FieldBatch", "ColumnarDataset", "DataCache", "cached_dataset", "file_identity"]
