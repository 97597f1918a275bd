"""dynalloc for PyTorch: the same policies, partition and run directories as the MXNet path,
over `torch.distributed` (the `torch` extra: `pip install ".[torch]"`)."""

from dynalloc.runtime.torch.batch import DynamicBatch
from dynalloc.runtime.torch.hook import ShareWeight, share_weighted_hook
from dynalloc.runtime.torch.launch import init_process_group

__all__ = ["DynamicBatch", "ShareWeight", "init_process_group", "share_weighted_hook"]
