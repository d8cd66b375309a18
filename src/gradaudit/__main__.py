import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while Python is still importing: nothing has run, nothing is written
    sys.stderr.write("interrupted: nothing was written; earlier results files are untouched.\n")
    sys.exit(130)

if __name__ == "__main__":
    main()
