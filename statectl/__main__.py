from statectl.cli.main import main

main()
