"""The numpy array types of the batch code (block scans, key hashing, value batches), named once."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Int64s = npt.NDArray[np.int64]
UInt32s = npt.NDArray[np.uint32]
UInt8s = npt.NDArray[np.uint8]
Bools = npt.NDArray[np.bool_]
