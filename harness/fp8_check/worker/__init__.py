"""What runs inside the compile worker, in any JAX environment (JAX and the standard library only) (stage `worker`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._aot import (
        TOPOLOGY_LINE,
        case_file_name,
        compile_device,
        device_count,
        dnn_field_read,
        dnn_fields_written,
        strip_version_fields,
        target_config_for,
        topology_of,
    )
    from ._device_view import BACKEND_QUESTIONS, not_representative, target_view
    from .serve import missing_module
else:
    __getattr__, __dir__, __all__ = attach(__name__)
