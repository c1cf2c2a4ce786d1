import sys
from pathlib import Path

# tests/builders.py is imported as a plain module by the engine tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))
