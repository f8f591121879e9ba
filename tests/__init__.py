"""The test suite: a package, so tests import shared helpers as testbed.<module>."""
