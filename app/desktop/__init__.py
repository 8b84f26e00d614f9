"""The Linux desktop over D-Bus: notifications we send, sleep and network news we follow.

No Qt here (dbus-fast on the asyncio loop), so the app and the headless worker share it.
Every part works, or quietly does nothing, where its service is missing.
"""
