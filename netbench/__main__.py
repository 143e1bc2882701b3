from netbench.cli.entry import main

main()
