"""The profile's dtype names (c10's ``ScalarType`` names, as ``record_param_comms`` writes them) as ddpsim's."""

from __future__ import annotations

from ddpsim.errors import InputError, shorten

_DTYPES = {"Float": "float32", "Half": "float16", "BFloat16": "bfloat16", "Double": "float64", "Long": "int64",
           "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
           "ComplexFloat": "complex64", "ComplexDouble": "complex128"}


def ddpsim_dtype(name: object, field: str) -> str:
    """``Float`` -> ``float32``; InputError naming ``field`` for a name it does not know."""
    if isinstance(name, str) and name in _DTYPES:
        return _DTYPES[name]
    raise InputError(f"{field}: {shorten(name)} is not a known dtype; expected one of {', '.join(_DTYPES)}")
