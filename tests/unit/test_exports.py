"""The public surface is deliberate: changing it must be a visible decision."""

import kstream
import kstream.errors


def test_top_level_exports() -> None:
    assert set(kstream.__all__) == {"KStreamError", "__version__"}


def test_every_error_descends_from_the_root() -> None:
    for name in kstream.errors.__all__:
        cls = getattr(kstream.errors, name)
        assert issubclass(cls, kstream.errors.KStreamError), name
        assert name.endswith("Error"), name
