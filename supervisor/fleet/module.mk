# supervisor/fleet — fleet mode on NATS JetStream (public header fleet.h, design docs/fleet.md)
LIBRARY_DIRS += supervisor/fleet
