"""The inventory: schema (models), cross-object rules (rules) and reading with positions (load)."""

from generator.errors import InventoryInvalid, Problem
from generator.inventory.load import load_inventory, load_inventory_text
from generator.inventory.models import Inventory

__all__ = ["Inventory", "InventoryInvalid", "Problem", "load_inventory", "load_inventory_text"]
