"""Every fruit error class survives pickling with its message: an error raised inside a
Dask task comes back to the command through pickle, and must still be the one line that
names the problem (not "TypeError: __init__() missing ... 'reason'")."""

from __future__ import annotations

import importlib
import pickle
import pkgutil

import fruit
from fruit.errors import FruitError


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _import_everything():
    for module in pkgutil.walk_packages(fruit.__path__, "fruit."):
        if module.name.endswith("__main__"):  # runs the command line
            continue
        try:
            importlib.import_module(module.name)
        except Exception:  # an optional dependency (a GPU path, the lab): not an error class
            continue


def test_every_fruit_error_pickles_with_its_message():
    from fruit.io import DamagedRecord

    _import_everything()
    classes = {FruitError, *_all_subclasses(FruitError)}
    assert DamagedRecord in classes and len(classes) >= 4
    for cls in classes:
        if cls is DamagedRecord:
            error = DamagedRecord("/x/data.json", "not valid JSON", "remove it")
        else:
            error = cls("a message naming the problem")
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is cls and str(back) == str(error), cls
        assert getattr(back, "exit_code", 2) == getattr(error, "exit_code", 2)


def test_names_that_become_folders_are_checked_in_one_line():
    import pytest

    from fruit.errors import check_name
    from fruit.names import ARCHITECTURES
    from fruit.tasks import TASKS

    for name in [*ARCHITECTURES, *TASKS, "Tf+Nd@4,5", "LSTM+Nd+Sup", "qf-nd-seeds"]:
        assert check_name("x", name) == name
    for bad in ["Tf/Nd", "", ".hidden", "a b", "Tf\\Nd", "Tf:Nd", 7]:
        with pytest.raises(FruitError, match="may use only letters, digits"):
            check_name("architecture", bad)
