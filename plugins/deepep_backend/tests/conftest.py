import sys
from pathlib import Path

# The stand-in module and the workers the gloo tests spawn are imported by name in every rank.
sys.path.insert(0, str(Path(__file__).parent))
