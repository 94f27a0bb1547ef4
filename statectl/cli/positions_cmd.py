"""`statectl positions`: where every source resumes (topic, partition, offset; file, position)."""

from __future__ import annotations

from statectl.cli.options import ReadOptions, ShowOptions, option_groups


@option_groups
def positions_command(
    shown: ShowOptions,
    *,
    read: ReadOptions,
) -> None:
    """Show each source's splits and offsets, where the job resumes reading.

    FileSource, KafkaSource, NumberSequenceSource and the legacy FlinkKafkaConsumer are decoded;
    other sources are shown as unrecognised splits.

    Examples:

      statectl positions ./savepoint-1a2b3c-0123456789ab

      statectl positions ./sp --operator kafka-in --json | jq '.sources[0].splits'
    """
    from statectl.cli import positions_view
    from statectl.cli.console import print_json

    savepoint = read.open(shown.path)
    report = savepoint.positions(shown.operator)
    if shown.json_output:
        print_json(positions_view.positions_json(report))
    else:
        positions_view.print_positions(report)
