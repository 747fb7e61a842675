"""The spec library: every number the system model uses, read from TOML spec files under
``sim/specs/`` (or a user directory given with ``--spec-dir``), each with its source and a
confidence note: :mod:`.files` (the field format), :mod:`.specs` (devices, power, models,
pairs), :mod:`.platforms` (NPU+PIM platforms), :mod:`.loading` (the library and its cache),
:mod:`.overrides` (spec-field overrides).
"""
