//! coord: a git-native, file-driven coordinator for work shared between AI agents and people.
