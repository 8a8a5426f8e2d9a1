"""`python -m mcutorch.program --c-header > runtime/include/mt_program.h`
(`python -m mcutorch.device.generate` writes and checks every generated C file).

Same as `python -m mcutorch.program.schema ...`, without runpy's warning about running a module
that the package import already loaded."""
import sys

from mcutorch.program.schema import main

sys.exit(main())
