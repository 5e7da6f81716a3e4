"""The inventory: schema (models), cross-object rules (rules) and reading with positions (load)."""

from generator.errors import InventoryInvalid, Problem

__all__ = ["Inventory", "InventoryInvalid", "Problem", "load_inventory", "load_inventory_text"]


def __getattr__(name: str):
    # The schema and the reader load on first use, not with the package: a component folder's settings.py imports
    # inventory.fields, and the schema imports each settings.py.
    if name == "Inventory":
        from generator.inventory.models import Inventory
        return Inventory
    if name in ("load_inventory", "load_inventory_text"):
        from generator.inventory import load
        return getattr(load, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
