"""The operator console (`/console`): where a human sees and decides what the safety loop holds back
(MCP-AQL §8.7.3, §8.8.2 "dedicated security dashboard"; docs/console.md)."""
