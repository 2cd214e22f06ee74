"""UnsupportedMask: raised by a converter whose target cannot express the mask."""


class UnsupportedMask(Exception):
    """The target representation cannot express this mask; the message says why."""
