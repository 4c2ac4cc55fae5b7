"""The decider's side of the loop: its client, the actuator that applies decisions, and the KEDA scaler."""

from streams.decider.client import DeciderClient, Desired

__all__ = ["DeciderClient", "Desired"]
